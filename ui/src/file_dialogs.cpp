// See file_dialogs.h.
#include "file_dialogs.h"

#include <QFileInfo>

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

QString run(QFileDialog& dialog) {
  dialog.setOption(QFileDialog::DontUseNativeDialog);
  dialog.setIconProvider(plain_icon_provider());
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return {};
  return dialog.selectedFiles().front();
}

}  // namespace

QAbstractFileIconProvider* plain_icon_provider() {
  static PlainIconProvider provider;
  return &provider;
}

QString open_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter) {
  QFileDialog dialog(parent, caption, dir, filter);
  dialog.setFileMode(QFileDialog::ExistingFile);
  dialog.setAcceptMode(QFileDialog::AcceptOpen);
  return run(dialog);
}

QString save_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter,
                       QFileDialog::Options options) {
  QFileDialog dialog(parent, caption, QString(), filter);
  dialog.setOptions(options);
  dialog.setFileMode(QFileDialog::AnyFile);
  dialog.setAcceptMode(QFileDialog::AcceptSave);
  const QFileInfo start(dir);
  if (start.isDir()) {
    dialog.setDirectory(dir);
  } else {
    if (!start.path().isEmpty()) dialog.setDirectory(start.absolutePath());
    dialog.selectFile(start.fileName());
  }
  return run(dialog);
}

QString existing_directory(QWidget* parent, const QString& caption, const QString& dir) {
  QFileDialog dialog(parent, caption, dir);
  dialog.setFileMode(QFileDialog::Directory);
  dialog.setOption(QFileDialog::ShowDirsOnly);
  return run(dialog);
}

}  // namespace snip::ui
