// See file_dialogs.h.
#include "file_dialogs.h"

#include <QDir>
#include <QFileInfo>
#include <QSettings>
#include <QTemporaryDir>
#include <memory>

namespace snip::ui {

namespace {

class PlainIconProvider : public QAbstractFileIconProvider {
 public:
  QIcon icon(IconType type) const override { return QAbstractFileIconProvider::icon(type); }
  QIcon icon(const QFileInfo& info) const override {
    return QAbstractFileIconProvider::icon(info.isDir() ? Folder : File);
  }
  QString type(const QFileInfo& info) const override {
    if (info.isDir()) return QObject::tr("Folder");
    return info.suffix().isEmpty() ? QObject::tr("File") : QObject::tr("%1 file").arg(info.suffix());
  }
};

std::function<void(QFileDialog&)>& observer() {
  static std::function<void(QFileDialog&)> f;
  return f;
}

// A dialog that has listed nothing yet, with the plain provider in place before it lists any
// folder: QFileDialog lists its first folder in its constructor, and Qt's default provider, there
// until setIconProvider, sniffs every file it lists (the constructor's folder is an empty one).
std::unique_ptr<QFileDialog> make_dialog(QWidget* parent, const QString& caption, const QString& filter) {
  static QTemporaryDir empty;
  auto dialog = std::make_unique<QFileDialog>(parent, caption, empty.path(), filter);
  dialog->setOption(QFileDialog::DontUseNativeDialog);
  dialog->setIconProvider(plain_icon_provider());
  return dialog;
}

const QString kLastFolderKey = QStringLiteral("dialogs/last_folder");

// Where a dialog given no folder of its own starts: the folder of the last file chosen in any
// of them (kept across sessions), else the working directory.
QString start_folder(const QString& given) {
  if (!given.isEmpty()) return given;
  const QString last = QSettings().value(kLastFolderKey).toString();
  return !last.isEmpty() && QFileInfo(last).isDir() ? last : QDir::currentPath();
}

QString run(QFileDialog& dialog) {
  if (observer()) observer()(dialog);
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return {};
  const QString chosen = dialog.selectedFiles().front();
  const QFileInfo info(chosen);
  QSettings().setValue(kLastFolderKey, info.absolutePath());  // the folder it is in
  return chosen;
}

}  // namespace

QAbstractFileIconProvider* plain_icon_provider() {
  static PlainIconProvider provider;
  return &provider;
}

void set_dialog_observer(std::function<void(QFileDialog&)> f) {
  observer() = std::move(f);
}

QString open_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter) {
  const auto dialog = make_dialog(parent, caption, filter);
  dialog->setFileMode(QFileDialog::ExistingFile);
  dialog->setAcceptMode(QFileDialog::AcceptOpen);
  dialog->setDirectory(start_folder(dir));
  return run(*dialog);
}

QString save_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter,
                       QFileDialog::Options options) {
  const auto dialog = make_dialog(parent, caption, filter);
  dialog->setOptions(options | QFileDialog::DontUseNativeDialog);
  dialog->setFileMode(QFileDialog::AnyFile);
  dialog->setAcceptMode(QFileDialog::AcceptSave);
  // A bare file name ("compare.csv") starts in the remembered folder; a path in its own.
  const QFileInfo start(dir);
  if (start.isDir()) {
    dialog->setDirectory(dir);
  } else {
    const bool bare = !dir.contains(QLatin1Char('/'));
    dialog->setDirectory(bare ? start_folder({}) : start.absolutePath());
    dialog->selectFile(start.fileName());
  }
  return run(*dialog);
}

QString existing_directory(QWidget* parent, const QString& caption, const QString& dir) {
  const auto dialog = make_dialog(parent, caption, QString());
  dialog->setFileMode(QFileDialog::Directory);
  dialog->setOption(QFileDialog::ShowDirsOnly);
  dialog->setDirectory(start_folder(dir));
  return run(*dialog);
}

}  // namespace snip::ui
